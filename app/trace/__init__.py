"""``python -m app trace <eventId>``: what happened to one event, consumer by consumer."""
