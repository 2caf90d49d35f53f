"""What up, the gateway and render k8s share: routing, health, Nginx render and control, state, events."""
