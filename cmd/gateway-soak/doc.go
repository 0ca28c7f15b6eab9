// Command gateway-soak is sessiongate's fault-injection soak.
package main
