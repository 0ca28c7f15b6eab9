// Package prometheus holds sessiongate's Prometheus alert rules
// (sessiongate-alerts.yaml). It has no Go code of its own; its test decodes
// the rules strictly, checks every metric they name against the metrics a
// cluster-mode gateway registers, and every alert against
// docs/operations.md.
package prometheus
