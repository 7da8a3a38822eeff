"""Airflow sensors for T9k Jobs."""
