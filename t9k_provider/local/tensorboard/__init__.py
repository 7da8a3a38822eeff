"""A local TensorBoard operator: T9k TensorBoards (tensorstack.dev/v1beta1) run as `tensorboard` pods over the
claims their file sets name (docs/local-cluster.md#tensorboard)."""
