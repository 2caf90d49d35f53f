"""The Nginx front, whole: dialects, pool layout, capacity, rendering, control, routing, targets, driver."""
