"""What the tests share: builders for pods, containers and T9k Jobs (`builders`), and one way to get a local
cluster and a controller as fixtures of the scope a module allows (`clusters`). Waiting is
`t9k_provider.testing.wait_for` / `wait_for_async`, which the benchmarks use too."""
