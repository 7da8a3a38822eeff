"""A local flink-operator: FlinkClusters (flinkoperator.k8s.io/v1beta1) run as Flink processes in pods."""
