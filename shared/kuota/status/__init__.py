"""ClusterQueue status from the decision stream: a small pure read model."""
