// Kueue's own role hash (sigs.k8s.io/kueue/pkg/util/pod.GenerateRoleHash) of each pod
// spec in a JSON array read on stdin, one per line: the oracle queuescope's role hashes
// are checked against (docs/cluster.md#pod-groups). Built by ../role_hash.py, for tests
// only.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	corev1 "k8s.io/api/core/v1"
	utilpod "sigs.k8s.io/kueue/pkg/util/pod"
)

func main() {
	var specs []corev1.PodSpec
	if err := json.NewDecoder(os.Stdin).Decode(&specs); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for i := range specs {
		hash, err := utilpod.GenerateRoleHash(&specs[i])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(hash)
	}
}
