"""The job's replica logs in the task log: which replicas (`targets`), the worker's reads at each change
and at the end (`follower`), and live streams (`streams`, run by the trigger in the triggerer's loop and by
`worker` in a thread of the worker). Parsing timestamped lines and resuming after them is `kube.podlogs`."""
