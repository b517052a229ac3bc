"""The kopf operator: reconciles Agent, Task and InstallationModel resources."""
