"""The task's job on the cluster: which job is the task instance's (`identity`), whether a later try adopts
or replaces it (`reattach`), submitting, reading and stopping it (`client`; `aio` for the trigger's kill
path, both under one stop policy, `stopping`), and what a wait reads of it (`feed`: its next state from the
shared watch, `watch`, and its pods)."""
