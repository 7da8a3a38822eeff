"""The local cluster's scheduler: binds pods to the one node where they fit (`fit`: requests against the
node's allocatable resources), gang-schedules T9k PodGroups, and says why a pod waits."""
