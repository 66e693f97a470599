"""TLS material of the visibility server: the CA, serving and client certificates, the
embedded state folder, the cluster certificate folder, and the checks the hot reloader
runs (cluster.md §2, §4.4). The stable import path is `visibility_server.certs`."""
