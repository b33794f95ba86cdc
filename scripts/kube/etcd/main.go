// Command etcd is kuota's build wrapper for the etcd server: etcd's own main
// module uses local replace directives, so `go install go.etcd.io/etcd/server/v3`
// is refused; this module requires go.etcd.io/etcd/server/v3 at the wanted
// version (scripts/stack.d/kube.sh writes its go.mod) and calls its entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
