// Package kubernetes holds sessiongate's Kubernetes manifests (plain YAML,
// kustomize-ready): the cluster pattern in this directory, the sidecar
// pattern in ./sidecar. It has no Go code of its own; its test decodes
// every manifest strictly into the Kubernetes API types and checks the
// invariants the gateway depends on (manifests_test.go says which).
package kubernetes
