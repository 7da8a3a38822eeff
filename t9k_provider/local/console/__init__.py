"""The local cluster's read-only web console: one page per T9k Job (phase, conditions, replicas and their
pods, events, the last log lines, the TensorBoard link) and an index of jobs (docs/local-cluster.md#console).
"""
