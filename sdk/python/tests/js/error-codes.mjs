// Prints libs/contracts' closed union of error codes and their HTTP statuses, for the Python test.
import { API_ERROR_CODES, HTTP_STATUS_BY_CODE, TAXONOMY_ERROR_CODES } from '../../../../libs/contracts/dist/index.js';

process.stdout.write(JSON.stringify({ taxonomy: TAXONOMY_ERROR_CODES, api: API_ERROR_CODES, status: HTTP_STATUS_BY_CODE }));
