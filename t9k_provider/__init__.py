"""Apache Airflow provider and controller for TensorStack T9k Jobs."""
