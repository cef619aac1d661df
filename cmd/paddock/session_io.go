package main

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	apiv1 "paddock.dev/paddock/api"
	"paddock.dev/paddock/client"
	"paddock.dev/paddock/guest/api"
)

// ioCommands are the session verbs for files, uploads, jobs, git and probe.
func ioCommands(g *globals, cl func() (*client.Client, error)) []*cobra.Command {
	printJSON := func(c *cobra.Command, v any) error {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	files := &cobra.Command{Use: "files ID PATH", Short: "List a directory (or stat a file) in the session", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		var l api.Listing
		if err := k.Call(c.Context(), "GET", args[0], "/files", url.Values{"path": {args[1]}}, nil, &l); err != nil {
			return err
		}
		if g.json {
			return printJSON(c, l)
		}
		tw := newTable(c.OutOrStdout(), "MODE", "SIZE", "MODIFIED", "NAME")
		for _, e := range l.Entries {
			name := e.Name
			if e.Type == api.TypeDir {
				name += "/"
			}
			tw.row(e.Mode, e.Size, e.MTime.Format(time.RFC3339), name)
		}
		return tw.flush()
	}}
	cat := &cobra.Command{Use: "cat ID PATH", Short: "Print a file from the session", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		var f apiv1.FileRead
		if err := k.Call(c.Context(), "GET", args[0], "/files/content", url.Values{"path": {args[1]}}, nil, &f); err != nil {
			return err
		}
		b, err := base64.StdEncoding.DecodeString(f.ContentBase64)
		if err != nil {
			return err
		}
		_, err = c.OutOrStdout().Write(b)
		return err
	}}
	var mode string
	put := &cobra.Command{Use: "put ID LOCAL PATH", Short: "Write a local file (≤ 8 MiB; larger ones: upload) into the session", Args: cobra.ExactArgs(3), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		b, err := readLimited(args[1], apiv1.MaxFileWriteBytes)
		if err != nil {
			return err
		}
		var fi api.FileInfo
		if err := k.Call(c.Context(), "PUT", args[0], "/files/content", nil, apiv1.FileWrite{Path: args[2], ContentBase64: base64.StdEncoding.EncodeToString(b), Mode: mode}, &fi); err != nil {
			return err
		}
		if g.json {
			return printJSON(c, fi)
		}
		fmt.Fprintf(c.OutOrStdout(), "wrote %s (%d bytes, mode %s)\n", cell(fi.Path), fi.Size, cell(fi.Mode))
		return nil
	}}
	put.Flags().StringVar(&mode, "mode", "", "octal mode, e.g. 755")
	var recursive bool
	rmFile := &cobra.Command{Use: "rm-file ID PATH", Short: "Remove a file (or, with -r, a directory) in the session", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		return k.Call(c.Context(), "DELETE", args[0], "/files", url.Values{"path": {args[1]}, "recursive": {strconv.FormatBool(recursive)}}, nil, nil)
	}}
	rmFile.Flags().BoolVarP(&recursive, "recursive", "r", false, "remove a directory and what it holds")
	var upMode string
	upload := &cobra.Command{Use: "upload ID LOCAL PATH", Short: "Resumable, verified upload of a large file (≤ 2 GiB), with progress", Args: cobra.ExactArgs(3), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		f, err := os.Open(args[1])
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		h := sha256.New()
		if _, err := io.Copy(h, f); err != nil {
			return err
		}
		var up apiv1.Upload
		if err := k.Call(c.Context(), "POST", args[0], "/uploads", nil, apiv1.UploadRequest{Path: args[2], Size: fi.Size(), SHA256: hex.EncodeToString(h.Sum(nil)), Mode: upMode}, &up); err != nil {
			return err
		}
		bar := progressbar.NewOptions64(fi.Size(), progressbar.OptionSetWriter(c.ErrOrStderr()), progressbar.OptionShowBytes(true),
			progressbar.OptionSetDescription("upload"), progressbar.OptionSetVisibility(!g.json))
		buf := make([]byte, apiv1.MaxUploadChunk)
		for off := int64(0); off < fi.Size(); {
			n, err := f.ReadAt(buf, off)
			if err != nil && err != io.EOF {
				return err
			}
			var got *apiv1.Upload
			for try := 0; ; try++ {
				got, err = k.UploadChunk(c.Context(), args[0], up.ID, off, buf[:n])
				if err == nil || try == 2 {
					break
				}
				// The chunk may have landed: ask where to go on.
				var cur apiv1.Upload
				if k.Call(c.Context(), "GET", args[0], "/uploads/"+up.ID, nil, nil, &cur) == nil && cur.Received > off {
					got, err = &cur, nil
					break
				}
			}
			if err != nil {
				return err
			}
			off = got.Received
			bar.Set64(off)
		}
		bar.Finish()
		fmt.Fprintln(c.ErrOrStderr())
		var done apiv1.Upload
		if err := k.Call(c.Context(), "POST", args[0], "/uploads/"+up.ID+"/complete", nil, nil, &done); err != nil {
			return err
		}
		if g.json {
			return printJSON(c, done)
		}
		fmt.Fprintf(c.OutOrStdout(), "uploaded %s (%d bytes, sha256 verified: %v)\n", cell(done.Path), done.Size, done.Verified)
		return nil
	}}
	upload.Flags().StringVar(&upMode, "mode", "", "octal mode")
	var stdin bool
	var jobTimeout int
	bg := &cobra.Command{Use: "bg ID -- COMMAND", Short: "Start a supervised background job; prints its id", Args: cobra.MinimumNArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		line := args[1]
		if len(args) > 2 {
			line = shellJoin(args[1:])
		}
		var j apiv1.Job
		if err := k.Call(c.Context(), "POST", args[0], "/jobs", nil, apiv1.JobStart{Command: line, Stdin: stdin, TimeoutSeconds: jobTimeout}, &j); err != nil {
			return err
		}
		if g.json {
			return printJSON(c, j)
		}
		fmt.Fprintln(c.OutOrStdout(), j.ID)
		return nil
	}}
	bg.Flags().BoolVar(&stdin, "stdin", false, "give the job a stdin (write with `session stdin`)")
	bg.Flags().IntVar(&jobTimeout, "timeout", 0, "seconds before the job is killed (0: none)")
	var follow bool
	logs := &cobra.Command{Use: "logs ID JOB", Short: "Print a job's output (-f follows it and exits with its code)", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		var off, eoff int64
		for {
			q := url.Values{"offset": {strconv.FormatInt(off, 10)}, "stderr_offset": {strconv.FormatInt(eoff, 10)}}
			if follow {
				q.Set("wait_ms", "20000")
			}
			var r apiv1.JobRead
			if err := k.Call(c.Context(), "GET", args[0], "/jobs/"+args[1], q, nil, &r); err != nil {
				return err
			}
			out, _ := base64.StdEncoding.DecodeString(r.OutputBase64)
			c.OutOrStdout().Write(out)
			fmt.Fprint(c.ErrOrStderr(), r.Stderr)
			off, eoff = r.NextOffset, r.StderrNextOffset
			if r.EOF {
				if r.ExitCode != nil && *r.ExitCode > 0 {
					return exitCodeError(*r.ExitCode)
				}
				if r.ExitCode != nil && *r.ExitCode < 0 {
					return exitCodeError(128 + 15)
				}
				return nil
			}
			if !follow && !r.More {
				return nil
			}
		}
	}}
	logs.Flags().BoolVarP(&follow, "follow", "f", false, "follow until the job ends")
	var closeIn bool
	stdinCmd := &cobra.Command{Use: "stdin ID JOB [TEXT]", Short: "Write to a job's stdin (--close sends end-of-file)", Args: cobra.RangeArgs(2, 3), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		req := apiv1.JobStdin{Close: closeIn}
		if len(args) == 3 {
			req.Text = args[2]
		}
		return k.Call(c.Context(), "POST", args[0], "/jobs/"+args[1]+"/stdin", nil, req, nil)
	}}
	stdinCmd.Flags().BoolVar(&closeIn, "close", false, "close the job's stdin after writing")
	var sig string
	kill := &cobra.Command{Use: "kill ID JOB", Short: "Signal a job's whole process tree", Args: cobra.ExactArgs(2), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		return k.Call(c.Context(), "DELETE", args[0], "/jobs/"+args[1], url.Values{"signal": {sig}}, nil, nil)
	}}
	kill.Flags().StringVar(&sig, "signal", "TERM", "TERM, KILL, INT, HUP, …")
	jobs := &cobra.Command{Use: "jobs ID", Short: "List the session's jobs", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		var out struct{ Jobs []apiv1.Job }
		if err := k.Call(c.Context(), "GET", args[0], "/jobs", nil, nil, &out); err != nil {
			return err
		}
		if g.json {
			return printJSON(c, out.Jobs)
		}
		tw := newTable(c.OutOrStdout(), "JOB", "STATE", "EXIT", "COMMAND")
		for _, j := range out.Jobs {
			code := "-"
			if j.ExitCode != nil {
				code = strconv.Itoa(*j.ExitCode)
			}
			tw.row(j.ID, j.State, code, j.Command)
		}
		return tw.flush()
	}}
	probe := &cobra.Command{Use: "probe ID", Short: "Which tools the sandbox has, and what that makes ready", Args: cobra.ExactArgs(1), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		var p api.Probe
		if err := k.Call(c.Context(), "GET", args[0], "/probe", nil, nil, &p); err != nil {
			return err
		}
		return printJSON(c, p)
	}}
	git := &cobra.Command{Use: "git ID status|diff|log|commit MESSAGE|branch NAME", Short: "Git in the session's workspace", Args: cobra.RangeArgs(2, 3), RunE: func(c *cobra.Command, args []string) error {
		k, err := cl()
		if err != nil {
			return err
		}
		var out apiv1.GitResult
		switch args[1] {
		case "status", "diff", "log":
			err = k.Call(c.Context(), "GET", args[0], "/git/"+args[1], nil, nil, &out)
		case "commit":
			if len(args) != 3 {
				return usageError{fmt.Errorf("git commit needs a message")}
			}
			err = k.Call(c.Context(), "POST", args[0], "/git/commit", nil, apiv1.GitRequest{Message: args[2]}, &out)
		case "branch":
			if len(args) != 3 {
				return usageError{fmt.Errorf("git branch needs a name")}
			}
			err = k.Call(c.Context(), "POST", args[0], "/git/branch", nil, apiv1.GitRequest{Name: args[2]}, &out)
		default:
			return usageError{fmt.Errorf("unknown git verb %q: status, diff, log, commit or branch", args[1])}
		}
		if err != nil {
			return err
		}
		if g.json {
			return printJSON(c, out)
		}
		switch {
		case out.Commit != "":
			fmt.Fprintln(c.OutOrStdout(), cell(out.Commit))
		case out.Branch != "":
			fmt.Fprintln(c.OutOrStdout(), cell(out.Branch))
		default:
			// git's own text: escaped on a terminal, as it is for a
			// program reading it (a diff to apply).
			fmt.Fprint(c.OutOrStdout(), textFor(c.OutOrStdout(), out.Output))
		}
		return nil
	}}
	return []*cobra.Command{files, cat, put, rmFile, upload, downloadCmd(g, cl), exportCmd(cl), bg, logs, stdinCmd, kill, jobs, probe, git}
}

// readLimited reads a local file of at most max bytes.
func readLimited(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max {
		return nil, usageError{fmt.Errorf("%s is larger than %d bytes: use `paddock session upload`", path, max)}
	}
	return b, nil
}

// downloadCmd is `session download|pull ID PATH LOCAL`: ranged reads into
// LOCAL.part, checked against the guest's sha256, then renamed.
func downloadCmd(g *globals, cl func() (*client.Client, error)) *cobra.Command {
	var resume bool
	c := &cobra.Command{
		Use:     "download ID PATH LOCAL",
		Aliases: []string{"pull"},
		Short:   "Copy a file out of the session (resumable, checked by sha256, with progress)",
		Args:    cobra.ExactArgs(3),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			part := args[2] + ".part"
			flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			var off int64
			if resume {
				if fi, err := os.Stat(part); err == nil {
					off, flags = fi.Size(), os.O_WRONLY|os.O_APPEND
				}
			}
			kept := off
			f, err := os.OpenFile(part, flags, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			// The first slice brings the whole file's checksum.
			var first apiv1.FileRange
			q := url.Values{"path": {args[1]}, "offset": {"0"}, "length": {"1"}, "checksum": {"true"}}
			if err := k.Call(c.Context(), "GET", args[0], "/files/range", q, nil, &first); err != nil {
				return err
			}
			bar := progressbar.NewOptions64(first.Size, progressbar.OptionSetWriter(c.ErrOrStderr()), progressbar.OptionShowBytes(true),
				progressbar.OptionSetDescription("download"), progressbar.OptionSetVisibility(!g.json))
			bar.Set64(off)
			for off < first.Size {
				var r apiv1.FileRange
				q := url.Values{"path": {args[1]}, "offset": {strconv.FormatInt(off, 10)}, "length": {strconv.Itoa(4 << 20)}}
				if err := k.Call(c.Context(), "GET", args[0], "/files/range", q, nil, &r); err != nil {
					return err
				}
				if r.Size != first.Size {
					return fmt.Errorf("%s changed size while it was read (%d, then %d bytes): download again", args[1], first.Size, r.Size)
				}
				b, err := base64.StdEncoding.DecodeString(r.DataBase64)
				if err != nil {
					return err
				}
				if len(b) == 0 {
					return fmt.Errorf("%s ended at %d bytes, before its size %d", args[1], off, first.Size)
				}
				if _, err := f.Write(b); err != nil {
					return err
				}
				off += int64(len(b))
				bar.Set64(off)
			}
			bar.Finish()
			fmt.Fprintln(c.ErrOrStderr())
			if err := f.Close(); err != nil {
				return err
			}
			got, err := fileSHA256(part)
			if err != nil {
				return err
			}
			if got != first.SHA256 {
				return fmt.Errorf("checksum mismatch: the guest's %s is %s, the copy is %s (kept as %s)", args[1], first.SHA256, got, part)
			}
			if err := os.Rename(part, args[2]); err != nil {
				return err
			}
			if kept > 0 {
				fmt.Fprintf(c.OutOrStdout(), "downloaded %s to %s (%d bytes, %d of them kept from %s, sha256 verified)\n", cell(args[1]), cell(args[2]), first.Size, kept, cell(part))
				return nil
			}
			fmt.Fprintf(c.OutOrStdout(), "downloaded %s to %s (%d bytes, sha256 verified)\n", cell(args[1]), cell(args[2]), first.Size)
			return nil
		},
	}
	c.Flags().BoolVar(&resume, "resume", false, "continue LOCAL.part from where it stopped")
	return c
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// exportCmd writes the session's trajectory as JSON Lines: a header with
// the session, then one step per line.
func exportCmd(cl func() (*client.Client, error)) *cobra.Command {
	var outPath, otlp string
	var otlpHeaders []string
	c := &cobra.Command{
		Use:   "export ID",
		Short: "Write the session's trajectory as JSON Lines (a session header, then one step per line)",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := cl()
			if err != nil {
				return err
			}
			var t apiv1.Trajectory
			if err := k.Call(c.Context(), "GET", args[0], "/trajectory", nil, nil, &t); err != nil {
				return err
			}
			if otlp != "" {
				n, err := sendOTLP(c.Context(), otlp, otlpHeaders, otlpTrace(t))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.ErrOrStderr(), "sent %d spans to %s/v1/traces\n", n, strings.TrimRight(otlp, "/"))
				if outPath == "" {
					return nil
				}
			}
			w := c.OutOrStdout()
			if outPath != "" {
				f, err := os.Create(outPath)
				if err != nil {
					return err
				}
				defer f.Close()
				w = f
			}
			enc := json.NewEncoder(w)
			if err := enc.Encode(map[string]any{"session": t.Session}); err != nil {
				return err
			}
			for _, s := range t.Steps {
				if err := enc.Encode(s); err != nil {
					return err
				}
			}
			return nil
		},
	}
	c.Flags().StringVar(&outPath, "out", "", "write to this file instead of stdout")
	c.Flags().StringVar(&otlp, "otlp", "", "also send the trajectory as an OTLP/HTTP JSON trace to this collector (e.g. http://collector:4318)")
	c.Flags().StringSliceVar(&otlpHeaders, "otlp-header", nil, "KEY=VALUE header for the collector (repeatable)")
	return c
}
