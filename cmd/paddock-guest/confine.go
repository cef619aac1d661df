package main

import "paddock.dev/paddock/guest/confine"

// confineMain runs the confine subcommand; args follow "confine". It
// returns only when the command could not be started.
func confineMain(args []string) int { return confine.Main(args) }
