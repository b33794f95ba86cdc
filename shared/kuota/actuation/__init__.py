"""What the actuator does to a Job for a decision, as pure patch computation."""
