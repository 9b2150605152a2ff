"""Plots and Markdown summaries of metrics files and scaling studies (matplotlib, no MPI)."""
