-- Every column type MariaDB 10.11 writes to the binlog, with edge values.
-- Used by test_values_live.py (decoded rows == SELECT) and by capture.py, which stored the binlog
-- bytes these statements produced in all_types.json (test_values_golden.py decodes them offline).
-- Statements are separated by lines holding only ";;".
SET SESSION sql_mode = '', time_zone = '+00:00'
;;
CREATE TABLE all_types (
  id INT NOT NULL PRIMARY KEY,
  ti TINYINT, tiu TINYINT UNSIGNED, si SMALLINT, siu SMALLINT UNSIGNED,
  mi MEDIUMINT, miu MEDIUMINT UNSIGNED, i INT, iu INT UNSIGNED, bi BIGINT, biu BIGINT UNSIGNED,
  f FLOAT, d DOUBLE,
  dec65 DECIMAL(65,30), dec10 DECIMAL(10,0), dec12 DECIMAL(12,4), dec5 DECIMAL(5,5), dec18 DECIMAL(18,9),
  dec30 DECIMAL(40,20),
  y YEAR, yu INT UNSIGNED, dt DATE, tm TIME, tm1 TIME(1), tm3 TIME(3), tm6 TIME(6),
  dtm DATETIME, dtm2 DATETIME(2), dtm6 DATETIME(6),
  ts TIMESTAMP NULL DEFAULT NULL, ts3 TIMESTAMP(3) NULL DEFAULT NULL, ts6 TIMESTAMP(6) NULL DEFAULT NULL,
  c CHAR(10), c_latin1 CHAR(10) CHARACTER SET latin1, c_big CHAR(255),
  vc VARCHAR(100), vc_latin1 VARCHAR(300) CHARACTER SET latin1, vc_long VARCHAR(1000),
  vc_ucs2 VARCHAR(10) CHARACTER SET ucs2, vc_utf16 VARCHAR(10) CHARACTER SET utf16,
  vc_utf32 VARCHAR(10) CHARACTER SET utf32, vc_gbk VARCHAR(10) CHARACTER SET gbk,
  vc_sjis VARCHAR(10) CHARACTER SET sjis, vc_cp1250 VARCHAR(10) CHARACTER SET cp1250,
  vc_euckr VARCHAR(10) CHARACTER SET euckr, vc_big5 VARCHAR(10) CHARACTER SET big5,
  vc_ascii VARCHAR(10) CHARACTER SET ascii, vc_utf8mb3 VARCHAR(10) CHARACTER SET utf8mb3,
  bin4 BINARY(4), vbin VARBINARY(20),
  tt TINYTEXT, t TEXT, mt MEDIUMTEXT, lt LONGTEXT,
  tb TINYBLOB, b BLOB, mb MEDIUMBLOB, lb LONGBLOB,
  e ENUM('a', 'b', 'ç'), s SET('x', 'y', 'z'), e_latin1 ENUM('é', 'f') CHARACTER SET latin1,
  bit1 BIT(1), bit9 BIT(9), bit64 BIT(64),
  j JSON,
  g GEOMETRY, pt POINT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
;;
INSERT INTO all_types (id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, f, d, dec65, dec10, dec12, dec5, dec18,
  dec30, y, yu, dt, tm, tm1, tm3, tm6, dtm, dtm2, dtm6, ts, ts3, ts6, c, c_latin1, c_big, vc, vc_latin1, vc_long,
  vc_ucs2, vc_utf16, vc_utf32, vc_gbk, vc_sjis, vc_cp1250, vc_euckr, vc_big5, vc_ascii, vc_utf8mb3, bin4, vbin,
  tt, t, mt, lt, tb, b, mb, lb, e, s, e_latin1, bit1, bit9, bit64, j, g, pt)
VALUES (1, -128, 0, -32768, 0, -8388608, 0, -2147483648, 0, -9223372036854775808, 0,
  -3.40282e38, -1.7976931348623157e308,
  '-99999999999999999999999999999999999.999999999999999999999999999999', -9999999999, -99999999.9999,
  -0.99999, -999999999.999999999, '-12345678901234567890.12345678901234567890',
  1901, 0, '1000-01-01', '-838:59:59', '-838:59:58.9', '-00:00:00.001', '-838:59:58.999999',
  '1000-01-01 00:00:00', '1000-01-01 00:00:00.01', '1000-01-01 00:00:00.000001',
  '1970-01-01 00:00:01', '1970-01-01 00:00:01.001', '1970-01-01 00:00:01.000001',
  'a', 'é', REPEAT('ü', 255), '', 'ÿ', REPEAT('x', 1000),
  'ā', 'ā', '😀', '中文', 'ｱ日本', 'Łódź', '한국', '中文', 'abc', 'ü',
  'ab', '', '', '', '', '', '', '', '', '', 'a', 'x', 'é', b'0', b'000000000', b'0',
  '{}', ST_GeomFromText('POINT(1 2)'), ST_GeomFromText('POINT(-1.5 2.25)', 4326))
;;
INSERT INTO all_types (id, ti, tiu, si, siu, mi, miu, i, iu, bi, biu, f, d, dec65, dec10, dec12, dec5, dec18,
  dec30, y, yu, dt, tm, tm1, tm3, tm6, dtm, dtm2, dtm6, ts, ts3, ts6, c, c_latin1, c_big, vc, vc_latin1, vc_long,
  vc_ucs2, vc_utf16, vc_utf32, vc_gbk, vc_sjis, vc_cp1250, vc_euckr, vc_big5, vc_ascii, vc_utf8mb3, bin4, vbin,
  tt, t, mt, lt, tb, b, mb, lb, e, s, e_latin1, bit1, bit9, bit64, j, g, pt)
VALUES (2, 127, 255, 32767, 65535, 8388607, 16777215, 2147483647, 4294967295, 9223372036854775807,
  18446744073709551615, 3.40282e38, 1.7976931348623157e308,
  '99999999999999999999999999999999999.999999999999999999999999999999', 9999999999, 99999999.9999,
  0.99999, 999999999.999999999, '12345678901234567890.12345678901234567890',
  2155, 4294967295, '9999-12-31', '838:59:59', '838:59:58.9', '00:00:00.001', '838:59:58.999999',
  '9999-12-31 23:59:59', '9999-12-31 23:59:59.99', '9999-12-31 23:59:59.999999',
  '2038-01-19 03:14:07', '2038-01-19 03:14:07.999', '2038-01-19 03:14:07.999999',
  'abcdefghij', 'ÀÿŒ€‰', REPEAT('😀', 255), 'x😀y', REPEAT('é', 300), REPEAT('😀', 1000),
  'ꙮꙮ', '😀ꙮ', '😀😀', '龘', 'ﾊﾞ', 'ąčęšž', '똠', '龘', '~', 'ꙮ',
  x'00FF0001', x'00', 'tiny', 'text', 'medium', 'long', x'FF', x'00FF', x'DEADBEEF', x'CAFE',
  'ç', 'x,y,z', 'f', b'1', b'111111111', b'1111111111111111111111111111111111111111111111111111111111111111',
  '{"a": [1, 2.5, "x", null, true, false, {"b": {}}], "n": -9223372036854775808, "u": 18446744073709551615}',
  ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0))'), ST_GeomFromText('POINT(0 0)'))
;;
INSERT INTO all_types (id) VALUES (3)
;;
INSERT INTO all_types (id, ti, dec65, dec12, y, dt, dtm, dtm6, ts, c, vc, vc_latin1, bin4, vbin, t, b, e, s, bit9,
  j, d, f, tm, tm6)
VALUES (4, 0, 0, '-0.0001', 0, '0000-00-00', '0000-00-00 00:00:00', '2020-00-10 00:00:00', '0000-00-00 00:00:00',
  '', '', '', '', '', '', '', '', '', 0,
  'null', 0, 0, '00:00:00', '-00:00:00.000001')
;;
INSERT INTO all_types (id, dt, dtm, dtm2, tm, tm1, tm3, vc, vc_latin1, c_latin1, d, f, dec18, dec30, j, bit64, s,
  ts6)
VALUES (5, '2024-02-29', '2024-02-29 12:34:56', '2024-02-29 12:34:56.78', '100:00:01', '-25:00:00.5',
  '49:59:59.123', 'ß🚀 ok', 'Ça coûte 5€ ‰', 'Ž', 0.1, 0.1, '0.000000001', '-0.00000000000000000001',
  '{"big": [1e300, -1e-300, 3.0, 12345678901234567890123], "s": "ünï\\u0000cødé 😀", "e": "", "nested": {"k": [[]]}}',
  b'1000000000000000000000000000000000000000000000000000000000000000', 'y,x', '2001-02-03 04:05:06.123456')
;;
UPDATE all_types SET vc = CONCAT(vc, '!'), i = 42, tm6 = '12:00:00.5', j = '[1, "two", 3.5]' WHERE id IN (2, 5)
;;
UPDATE all_types SET ti = NULL, c = NULL WHERE id = 1
;;
DELETE FROM all_types WHERE id = 4
