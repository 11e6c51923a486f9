DROP TABLE call_records;
DROP TABLE assets;
