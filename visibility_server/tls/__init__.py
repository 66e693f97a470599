"""TLS material of the visibility server: the CA, serving and client certificates, the
embedded state folder, the cluster certificate folder, and the checks the hot reloader
runs (docs/cluster.md#tls-and-certificates, #embedded-mode). The stable import path is
`visibility_server.certs`."""
