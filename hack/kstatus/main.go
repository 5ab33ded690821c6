// Command kstatus prints the kstatus verdict (github.com/fluxcd/cli-utils/pkg/kstatus/status.Compute) of each JSON object
// read from stdin, one JSON line per object: what Helm 4's --wait, Flux and Argo CD's kstatus-based checks conclude.
//
// The project's tests pipe WebServers through it to assert that the status conditions the operator writes are read
// as InProgress, Current or Failed exactly when they should be.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

type verdict struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	dec := json.NewDecoder(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return
		} else if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: stdin is not a stream of JSON objects: %v\n", err)
			os.Exit(2)
		}
		// The API machinery's decoder keeps whole numbers as int64, as unstructured objects expect.
		var obj map[string]interface{}
		if err := utiljson.Unmarshal(raw, &obj); err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(2)
		}
		res, err := status.Compute(&unstructured.Unstructured{Object: obj})
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(1)
		}
		if err := out.Encode(verdict{Status: res.Status.String(), Message: res.Message}); err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(1)
		}
	}
}
