// Command etcd runs the etcd server for the e2e control plane.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
