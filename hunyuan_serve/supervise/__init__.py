"""`up`: replicas behind a rendered Nginx, supervised."""
