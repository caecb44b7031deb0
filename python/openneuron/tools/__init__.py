"""Command-line tools of OpenNeuron (`openneuron ...`): benchmark reports, cost per work."""
