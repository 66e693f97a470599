"""The app's routes, one module per concern: discovery, OpenAPI, the pending workloads
(data), health and metrics; the dashboard's are in `visibility_server/dashboard/`."""
