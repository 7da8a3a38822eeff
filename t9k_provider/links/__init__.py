"""Airflow extra links for T9k Jobs."""
