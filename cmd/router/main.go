// Command router is a toolkit for operators of LLM inference fleets: it compiles routing
// configurations, explains engine selection, serves the router, migrates legacy
// sgl-router command lines, simulates engines and watches a running router.
package main

import "os"

func main() {
	os.Exit(Main(os.Args, os.Stdout, os.Stderr))
}
