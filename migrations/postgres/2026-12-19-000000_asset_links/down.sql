DROP TABLE asset_shares;
DROP TABLE link_keys;
