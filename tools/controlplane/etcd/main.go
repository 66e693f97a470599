// Command etcd builds the etcd server from its Go module for queuescope's e2e tests.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
