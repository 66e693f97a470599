"""The built-in dashboard: a static page and JSON endpoints under `/dashboard`, outside
the visibility API's paths (docs/dashboard.md)."""

from visibility_server.dashboard.handler import (
    DASHBOARD_PREFIX,
    Dashboard,
    DashboardRequest,
    is_dashboard_path,
)

__all__ = ["DASHBOARD_PREFIX", "Dashboard", "DashboardRequest", "is_dashboard_path"]
