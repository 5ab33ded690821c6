// Command webserver-peer-go is the benchmark's controller-runtime peer of webserver-operator, plus the "raw limit"
// driver that creates or updates the same children directly, with no controller in between.
//
//	webserver-peer-go operator --workers 4          run the operator (kubeconfig from --kubeconfig / $KUBECONFIG)
//	webserver-peer-go raw create --namespace NS -c 64   create every WebServer's Deployment and Service
//	webserver-peer-go raw image --namespace NS -c 64 --image IMG   set the image of every Deployment
//
// The raw driver prints one JSON line with wall-clock start and end (Unix seconds), request and error counts.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

var peerScheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(peerScheme))
	utilruntime.Must(SchemeBuilder.AddToScheme(peerScheme))
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: webserver-peer-go operator|raw ... (see the source header)")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "operator":
		os.Exit(runOperator(os.Args[2:]))
	case "raw":
		os.Exit(runRaw(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "unknown command %q: use operator or raw\n", os.Args[1])
		os.Exit(2)
	}
}

func runOperator(args []string) int {
	fs := flag.NewFlagSet("operator", flag.ExitOnError)
	workers := fs.Int("workers", 4, "WebServers reconciled concurrently (MaxConcurrentReconciles)")
	opts := zap.Options{Development: false}
	opts.BindFlags(fs)
	ctrl.RegisterFlags(fs)
	_ = fs.Parse(args)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	setupLog := ctrl.Log.WithName("setup")

	cfg := ctrl.GetConfigOrDie()
	cfg.UserAgent = "webserver-peer-go"
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 peerScheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		setupLog.Error(err, "unable to create manager")
		return 1
	}
	if err := (&WebServerReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()}).SetupWithManager(mgr, *workers); err != nil {
		setupLog.Error(err, "unable to create controller")
		return 1
	}
	setupLog.Info("starting manager")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		setupLog.Error(err, "problem running manager")
		return 1
	}
	return 0
}

type rawResult struct {
	Start    float64 `json:"start"`
	End      float64 `json:"end"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	FirstErr string  `json:"first_error,omitempty"`
}

func unix(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func runRaw(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: webserver-peer-go raw create|image --namespace NS [-c N] [--image IMG]")
		return 2
	}
	mode := args[0]
	fs := flag.NewFlagSet("raw", flag.ExitOnError)
	namespace := fs.String("namespace", "", "namespace of the WebServers")
	concurrency := fs.Int("c", 64, "requests in flight")
	image := fs.String("image", "", "new image (raw image)")
	ctrl.RegisterFlags(fs)
	_ = fs.Parse(args[1:])
	if *namespace == "" {
		fmt.Fprintln(os.Stderr, "raw: --namespace is required")
		return 2
	}
	cfg := ctrl.GetConfigOrDie()
	cfg.UserAgent = "webserver-raw-go"
	c, err := client.New(cfg, client.Options{Scheme: peerScheme})
	if err != nil {
		fmt.Fprintf(os.Stderr, "raw: client: %v\n", err)
		return 1
	}
	ctx := context.Background()
	list := &WebServerList{}
	if err := c.List(ctx, list, client.InNamespace(*namespace)); err != nil {
		fmt.Fprintf(os.Stderr, "raw: list WebServers: %v\n", err)
		return 1
	}
	r := &WebServerReconciler{Client: c, Scheme: peerScheme}
	var jobs []func() error
	for i := range list.Items {
		ws := &list.Items[i]
		switch mode {
		case "create":
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: ws.Name, Namespace: ws.Namespace}}
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ws.Name, Namespace: ws.Namespace}}
			if err := r.mutateDeployment(ws, dep); err != nil {
				fmt.Fprintf(os.Stderr, "raw: %v\n", err)
				return 1
			}
			if err := r.mutateService(ws, svc); err != nil {
				fmt.Fprintf(os.Stderr, "raw: %v\n", err)
				return 1
			}
			jobs = append(jobs, func() error { return c.Create(ctx, dep) }, func() error { return c.Create(ctx, svc) })
		case "image":
			patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, containerName, *image)
			dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: ws.Name, Namespace: ws.Namespace}}
			jobs = append(jobs, func() error {
				return c.Patch(ctx, dep, client.RawPatch(types.StrategicMergePatchType, []byte(patch)))
			})
		default:
			fmt.Fprintf(os.Stderr, "raw: unknown mode %q: use create or image\n", mode)
			return 2
		}
	}
	res := rawResult{}
	var errs, done atomic.Int64
	var firstErr sync.Once
	queue := make(chan func() error)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < *concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range queue {
				if err := job(); err != nil {
					errs.Add(1)
					firstErr.Do(func() { res.FirstErr = err.Error() })
				}
				done.Add(1)
			}
		}()
	}
	for _, job := range jobs {
		queue <- job
	}
	close(queue)
	wg.Wait()
	res.Start, res.End = unix(start), unix(time.Now())
	res.Requests, res.Errors = done.Load(), errs.Load()
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if res.Errors > 0 {
		return 1
	}
	return 0
}
