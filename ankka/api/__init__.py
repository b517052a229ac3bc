"""What more than one deployable needs: resource models and the capability vocabulary."""
