// The WebServer reconciler as kubebuilder scaffolds one: For(WebServer) + Owns(Deployment, Service), each child
// brought in line with controllerutil.CreateOrUpdate and SetControllerReference, then the status written with
// Status().Update when it changed. It creates the same children as webserver-operator (names, labels, selector,
// owner reference, container and port) and reports the same status fields and Ready condition, so the benchmark
// compares equal work.
package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const (
	containerName = "web"
	portName      = "http"
)

// WebServerReconciler reconciles a WebServer object.
type WebServerReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

func selectorLabels(name string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": "webserver", "app.kubernetes.io/instance": name}
}

func childLabels(name string) map[string]string {
	labels := selectorLabels(name)
	labels["app.kubernetes.io/managed-by"] = "webserver-operator"
	labels["app.kubernetes.io/component"] = "web-server"
	return labels
}

func selectorString(name string) string {
	labels := selectorLabels(name)
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return strings.Join(parts, ",")
}

func setLabels(meta *metav1.ObjectMeta, labels map[string]string) {
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	for k, v := range labels {
		meta.Labels[k] = v
	}
}

func replicasOf(ws *WebServer) int32 {
	if ws.Spec.Replicas == nil {
		return 1
	}
	return *ws.Spec.Replicas
}

func portOf(ws *WebServer) int32 {
	if ws.Spec.Port == 0 {
		return 80
	}
	return ws.Spec.Port
}

// Reconcile moves the cluster towards the WebServer's spec.
func (r *WebServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ws := &WebServer{}
	if err := r.Get(ctx, req.NamespacedName, ws); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ws.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: ws.Name, Namespace: ws.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		return r.mutateDeployment(ws, dep)
	}); err != nil {
		return ctrl.Result{}, err
	}

	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: ws.Name, Namespace: ws.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.Client, svc, func() error {
		return r.mutateService(ws, svc)
	}); err != nil {
		return ctrl.Result{}, err
	}

	status := computeStatus(ws, dep, svc)
	if !equality.Semantic.DeepEqual(ws.Status, status) {
		ws.Status = status
		if err := r.Status().Update(ctx, ws); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func (r *WebServerReconciler) mutateDeployment(ws *WebServer, dep *appsv1.Deployment) error {
	setLabels(&dep.ObjectMeta, childLabels(ws.Name))
	if dep.CreationTimestamp.IsZero() {
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: selectorLabels(ws.Name)}
	}
	replicas := replicasOf(ws)
	dep.Spec.Replicas = &replicas
	setLabels(&dep.Spec.Template.ObjectMeta, childLabels(ws.Name))

	pod := &dep.Spec.Template.Spec
	idx := -1
	for i := range pod.Containers {
		if pod.Containers[i].Name == containerName {
			idx = i
		}
	}
	if idx < 0 {
		pod.Containers = append(pod.Containers, corev1.Container{Name: containerName})
		idx = len(pod.Containers) - 1
	}
	c := &pod.Containers[idx]
	c.Image = ws.Spec.Image
	c.Ports = []corev1.ContainerPort{{Name: portName, ContainerPort: portOf(ws), Protocol: corev1.ProtocolTCP}}
	if ws.Spec.Resources != nil {
		c.Resources = *ws.Spec.Resources.DeepCopy()
	} else {
		c.Resources = corev1.ResourceRequirements{}
	}
	pod.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), ws.Spec.ImagePullSecrets...)
	if len(pod.ImagePullSecrets) == 0 {
		pod.ImagePullSecrets = nil
	}
	return controllerutil.SetControllerReference(ws, dep, r.Scheme)
}

func (r *WebServerReconciler) mutateService(ws *WebServer, svc *corev1.Service) error {
	setLabels(&svc.ObjectMeta, childLabels(ws.Name))
	svc.Spec.Type = corev1.ServiceTypeNodePort
	svc.Spec.Selector = selectorLabels(ws.Name)
	port := corev1.ServicePort{
		Name:       portName,
		Port:       portOf(ws),
		TargetPort: intstr.FromString(portName),
		Protocol:   corev1.ProtocolTCP,
	}
	// Keep the node port the API server allocated unless the WebServer asks for one.
	for _, p := range svc.Spec.Ports {
		if p.Name == portName {
			port.NodePort = p.NodePort
		}
	}
	if ws.Spec.NodePort != nil {
		port.NodePort = *ws.Spec.NodePort
	}
	svc.Spec.Ports = []corev1.ServicePort{port}
	return controllerutil.SetControllerReference(ws, svc, r.Scheme)
}

func computeStatus(ws *WebServer, dep *appsv1.Deployment, svc *corev1.Service) WebServerStatus {
	status := *ws.Status.DeepCopy()
	status.ObservedGeneration = ws.Generation
	status.Replicas = dep.Status.Replicas
	status.ReadyReplicas = dep.Status.ReadyReplicas
	status.Selector = selectorString(ws.Name)
	status.NodePort = 0
	for _, p := range svc.Spec.Ports {
		if p.Name == portName {
			status.NodePort = p.NodePort
		}
	}
	cond := metav1.Condition{Type: "Ready", ObservedGeneration: ws.Generation}
	desired := replicasOf(ws)
	s := dep.Status
	switch {
	case s.ObservedGeneration < dep.Generation:
		cond.Status, cond.Reason = metav1.ConditionFalse, "RollingOut"
		cond.Message = fmt.Sprintf("Waiting for the Deployment controller to observe generation %d.", dep.Generation)
	case s.Replicas > s.UpdatedReplicas:
		cond.Status, cond.Reason = metav1.ConditionFalse, "RollingOut"
		cond.Message = fmt.Sprintf("Rolling out: %d/%d pods updated.", s.UpdatedReplicas, desired)
	case s.UpdatedReplicas != desired || s.AvailableReplicas != desired || s.Replicas != desired:
		cond.Status, cond.Reason = metav1.ConditionFalse, "Scaling"
		cond.Message = fmt.Sprintf("%d/%d pods available.", s.AvailableReplicas, desired)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, "Available"
		cond.Message = fmt.Sprintf("%d/%d pods available.", s.AvailableReplicas, desired)
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	return status
}

// SetupWithManager wires the controller: For the WebServer, Owns its Deployment and Service.
func (r *WebServerReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&WebServer{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Named("webserver").
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}
