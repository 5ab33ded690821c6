// The WebServer API types, written by hand the way controller-gen would generate them for a kubebuilder project
// (api/v1/webserver_types.go plus zz_generated.deepcopy.go). They mirror config/crd/bases exactly: the peer reads
// and writes the same objects as webserver-operator.
package main

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// GroupVersion is the CRD's group and served version.
var GroupVersion = schema.GroupVersion{Group: "web.webserver-operator.dev", Version: "v1"}

// SchemeBuilder registers the WebServer types, as kubebuilder's groupversion_info.go does.
var SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// WebServerSpec is the desired state.
type WebServerSpec struct {
	Image            string                        `json:"image"`
	Replicas         *int32                        `json:"replicas,omitempty"`
	Port             int32                         `json:"port,omitempty"`
	NodePort         *int32                        `json:"nodePort,omitempty"`
	Resources        *corev1.ResourceRequirements  `json:"resources,omitempty"`
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// WebServerStatus is the observed state.
type WebServerStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Replicas           int32              `json:"replicas"`
	ReadyReplicas      int32              `json:"readyReplicas"`
	Selector           string             `json:"selector,omitempty"`
	NodePort           int32              `json:"nodePort,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

// WebServer is the Schema for the webservers API.
type WebServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   WebServerSpec   `json:"spec"`
	Status WebServerStatus `json:"status,omitempty"`
}

// WebServerList contains a list of WebServer.
type WebServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WebServer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&WebServer{}, &WebServerList{})
}

// DeepCopyInto copies the spec into out.
func (in *WebServerSpec) DeepCopyInto(out *WebServerSpec) {
	*out = *in
	if in.Replicas != nil {
		v := *in.Replicas
		out.Replicas = &v
	}
	if in.NodePort != nil {
		v := *in.NodePort
		out.NodePort = &v
	}
	if in.Resources != nil {
		out.Resources = in.Resources.DeepCopy()
	}
	if in.ImagePullSecrets != nil {
		out.ImagePullSecrets = append([]corev1.LocalObjectReference(nil), in.ImagePullSecrets...)
	}
}

// DeepCopyInto copies the status into out.
func (in *WebServerStatus) DeepCopyInto(out *WebServerStatus) {
	*out = *in
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopy returns a copy of the status.
func (in *WebServerStatus) DeepCopy() *WebServerStatus {
	out := new(WebServerStatus)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies the WebServer into out.
func (in *WebServer) DeepCopyInto(out *WebServer) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of the WebServer.
func (in *WebServer) DeepCopy() *WebServer {
	if in == nil {
		return nil
	}
	out := new(WebServer)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *WebServer) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies the list into out.
func (in *WebServerList) DeepCopyInto(out *WebServerList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]WebServer, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *WebServerList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(WebServerList)
	in.DeepCopyInto(out)
	return out
}
