"""Node agents of the local cluster: scheduler, process kubelet, batch/v1 Job controller."""
