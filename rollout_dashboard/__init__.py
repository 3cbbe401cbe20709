"""`rollout-dashboard`: starts the Streamlit dashboard (see rollout_dashboard.launch)."""
