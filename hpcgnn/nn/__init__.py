"""Neural-network layers with injected parameters: the one GCN layer every model uses."""
