"""One module per model family; each exports WORKLOADS (a list of workloads.Workload)."""
