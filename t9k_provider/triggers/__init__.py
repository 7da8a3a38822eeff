"""Airflow triggers for T9k Jobs."""
