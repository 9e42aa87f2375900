"""SQS intake: every job message becomes exactly one stored job or one dead-letter entry."""
