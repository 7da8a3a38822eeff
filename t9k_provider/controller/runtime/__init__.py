"""The controller's I/O: informers, work queue, reconcile glue, status, events, leader election, HTTP."""
