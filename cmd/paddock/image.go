//go:build linux

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"paddock.dev/paddock/hypervisor/image"
)

func newImageCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "image", Short: "Build and list sandbox images"}
	var builder, suite, mirror string
	var include []string
	var logFile string
	var vm bool
	build := &cobra.Command{
		Use:   "build NAME",
		Short: "Build an image (builder mini: host tools, seconds; debian: debootstrap, minutes)",
		Long: `Build an image (builder mini: host tools, seconds; debian: debootstrap, minutes).

--vm also makes the image's boot kit for the qemu backend (Debian's cloud
kernel, an initramfs carrying paddock-guest, an ext4 root disk of the
image), which a qemu session otherwise makes on its first create. The
kernel and initramfs are cached in <state-dir>/vm-cache (env
PADDOCK_VM_CACHE), the root disk beside the image build.`,
		Example: `  paddock image build mini --builder mini
  paddock image build debian --builder debian --include jq --vm`,
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			s := image.Store{Dir: g.imagesDir()}
			name := args[0]
			if err := image.ValidName(name); err != nil {
				return usageError{err}
			}
			if vm {
				if _, err := g.vmTools(c); err != nil {
					return err
				}
			}
			prog := newProgress(c.ErrOrStderr(), g.json)
			start := time.Now()
			var m image.Meta
			var err error
			switch builder {
			case "mini":
				m, err = s.BuildMini(c.Context(), name, prog.update)
			case "debian":
				opt := image.DebianOptions{Suite: suite, Mirror: mirror, Include: include}
				if logFile != "" {
					f, ferr := os.Create(logFile)
					if ferr != nil {
						return ferr
					}
					defer f.Close()
					opt.Log = f
				}
				m, err = s.BuildDebian(c.Context(), name, opt, prog.update)
			default:
				return usageError{fmt.Errorf("unknown builder %q: use mini or debian", builder)}
			}
			prog.finish()
			if err != nil {
				return err
			}
			if !vm {
				if g.json {
					return json.NewEncoder(c.OutOrStdout()).Encode(m)
				}
				fmt.Fprintf(c.OutOrStdout(), "built image %s (%s, %d files, %.1f MiB) in %s\n", m.Name, m.Builder, m.Files, float64(m.Bytes)/(1<<20), time.Since(start).Round(time.Millisecond))
				return nil
			}
			if !g.json {
				fmt.Fprintf(c.OutOrStdout(), "built image %s (%s, %d files, %.1f MiB) in %s\n", m.Name, m.Builder, m.Files, float64(m.Bytes)/(1<<20), time.Since(start).Round(time.Millisecond))
			}
			k, err := g.buildVMKit(c, name)
			if err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(c.OutOrStdout()).Encode(struct {
					image.Meta
					VM *vmKitInfo `json:"vm"`
				}{m, k})
			}
			return nil
		},
	}
	build.Flags().StringVar(&builder, "builder", "", "mini or debian (default: the image name when it is one of those)")
	build.Flags().StringVar(&suite, "suite", "bookworm", "Debian suite (debian builder)")
	build.Flags().StringVar(&mirror, "mirror", "http://deb.debian.org/debian", "Debian mirror (debian builder)")
	build.Flags().StringSliceVar(&include, "include", nil, "extra Debian packages (debian builder)")
	build.Flags().StringVar(&logFile, "log", "", "write debootstrap's full output to this file")
	build.Flags().BoolVar(&vm, "vm", false, "also make the image's boot kit for the qemu backend (kernel, initramfs, root disk)")
	build.PreRunE = func(c *cobra.Command, args []string) error {
		if builder == "" && len(args) == 1 && (args[0] == "mini" || args[0] == "debian") {
			builder = args[0]
		}
		if builder == "" {
			return usageError{fmt.Errorf("say which builder to use: --builder mini or --builder debian")}
		}
		return nil
	}

	ls := &cobra.Command{
		Use:   "ls",
		Short: "List built images",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			ms, err := image.Store{Dir: g.imagesDir()}.List()
			if err != nil {
				return err
			}
			if g.json {
				if ms == nil {
					ms = []image.Meta{}
				}
				return json.NewEncoder(c.OutOrStdout()).Encode(ms)
			}
			tw := newTable(c.OutOrStdout(), "NAME", "BUILDER", "FILES", "SIZE", "CREATED")
			for _, m := range ms {
				tw.row(m.Name, m.Builder, m.Files, fmt.Sprintf("%.1f MiB", float64(m.Bytes)/(1<<20)), m.CreatedAt.Format(time.RFC3339))
			}
			return tw.flush()
		},
	}
	rm := &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove an image",
		Args:  cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return image.Store{Dir: g.imagesDir()}.Remove(args[0])
		},
	}
	vmc := &cobra.Command{
		Use:   "vm NAME",
		Short: "Make (or find cached) a built image's boot kit for the qemu backend",
		Long: `Make a built image's boot kit for the qemu backend: Debian's cloud kernel
(apt-get download), an initramfs carrying paddock-guest, and an ext4 root
disk of the image. What is cached is reused; a qemu session makes the kit
on its first create when this was not run.`,
		Example: "  paddock image vm mini",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			k, err := g.buildVMKit(c, args[0])
			if err != nil {
				return err
			}
			if g.json {
				return json.NewEncoder(c.OutOrStdout()).Encode(k)
			}
			return nil
		},
	}
	cmd.AddCommand(build, ls, rm, vmc)
	return cmd
}

// progress shows build phases as a progress bar on a terminal (a spinner
// for a phase of unknown size), or as one line per phase otherwise, with
// its count when it has one (and nothing with --json).
type progress struct {
	w     io.Writer
	quiet bool
	tty   bool
	phase string
	done  int
	total int
	bar   *progressbar.ProgressBar
}

func newProgress(w io.Writer, quiet bool) *progress {
	f, ok := w.(*os.File)
	return &progress{w: w, quiet: quiet, tty: ok && term.IsTerminal(int(f.Fd()))}
}

func (p *progress) update(phase string, done, total int) {
	if p.quiet {
		return
	}
	if phase != p.phase {
		p.endPhase()
		p.phase = phase
		if !p.tty {
			fmt.Fprintln(p.w, phase)
		} else {
			opts := []progressbar.Option{
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetDescription(fmt.Sprintf("%-12s", phase)),
				progressbar.OptionSetWidth(30),
				progressbar.OptionThrottle(100 * time.Millisecond),
			}
			if total > 0 {
				opts = append(opts, progressbar.OptionShowCount())
			} else {
				opts = append(opts, progressbar.OptionSpinnerType(14), progressbar.OptionShowElapsedTimeOnFinish())
			}
			max := int64(total)
			if max <= 0 {
				max = -1
			}
			p.bar = progressbar.NewOptions64(max, opts...)
		}
	}
	p.done, p.total = done, total
	if p.bar == nil {
		return
	}
	if total > 0 && int64(total) != p.bar.GetMax64() {
		p.bar.ChangeMax64(int64(total))
	}
	p.bar.Set(done)
}

// endPhase closes the current phase: the bar's last state, or a count line.
func (p *progress) endPhase() {
	if p.bar != nil {
		p.bar.Finish()
		fmt.Fprintln(p.w)
		p.bar = nil
	} else if p.phase != "" && p.total > 0 {
		fmt.Fprintf(p.w, "%s %d/%d\n", p.phase, p.done, p.total)
	}
}

func (p *progress) finish() {
	if !p.quiet {
		p.endPhase()
	}
	p.phase = ""
}
