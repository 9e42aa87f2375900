"""Each worker's own broker account: issued when EC2 lists its instance, revoked when it no
longer does (`issuer`), kept in the broker (`dynsec`) and handed to the instance alone (`ssm`)."""
