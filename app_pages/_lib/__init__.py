"""Shared helpers of the dashboard pages: URL-backed settings, the sidebar, cached core calls, shared views."""
