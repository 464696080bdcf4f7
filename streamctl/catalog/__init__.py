"""The data layer (rank 2 of DESIGN §7): the relational catalog (SQLite or PostgreSQL) as
SQLAlchemy 2 typed models, its migrations, and the reads and writes a pass makes."""
