DROP TABLE oauth_signing_keys;
DROP TABLE oauth_consents;
DROP TABLE oauth_refresh_tokens;
DROP TABLE oauth_refresh_families;
DROP TABLE oauth_once_records;
DROP TABLE oauth_clients;
